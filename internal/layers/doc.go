// Package layers holds only a test: that every import of cove's packages
// points down, from the command line through the launcher and the
// workspace to the runtime and the leaf helpers under internal/.
package layers
