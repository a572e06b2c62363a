// Package ide is Cove's browser IDE bridge. It has two halves: the server
// that runs inside the workspace container on a Unix socket (NewHandler:
// the project's files, and next its terminals and agent), and the Proxy on
// the host, which is the only way in: loopback only, the launch's token,
// Host and Origin checks. On the host, ProjectRoutes also serves what
// needs the whole project at once (search, replace, quick open, the names
// the tree dims) without running anything the project configures.
package ide
