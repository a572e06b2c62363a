// Package image pulls OCI images and flattens them into root filesystems.
//
// Start with [Open], which opens the on-disk [Store], and [Pull], which
// makes an image available in it:
//
//	s, err := image.Open(dir)
//	img, err := image.Pull(ctx, s, "debian:bookworm", image.WithPlatform(p))
//	// img.RootFS is the flattened, read-only root filesystem.
//
// References are parsed by [ParseReference]: registry references (through
// go-containerregistry, with credentials from the Docker config) and the
// local transports oci:, oci-archive: and docker-archive:.
//
// Flattening is safe against hostile layers: every entry is resolved inside
// the root afresh, the last path component is never followed, and a layer
// cannot write, chmod or link anything outside the root. Errors say what
// went wrong and what to do; [DigestError], [ErrUnsafeEntry], [ErrTooLarge]
// and [ErrNotFound] can be inspected with errors.As and errors.Is.
//
// The package prints nothing: progress arrives through [WithProgress].
package image
