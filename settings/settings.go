// Package settings reads the user's own cove settings: the file
// settings.json in cove's config directory (dirs.ConfigDir:
// $XDG_CONFIG_HOME/cove, else ~/.config/cove), written by the user, never
// by cove and never by a workspace:
//
//	{
//	  "image": "registry.example/dev/base:1",
//	  "registryMirrors": {"docker.io": ["mirror.example:5000"]}
//	}
//
// image is the workspace image when neither --image nor the project's
// devcontainer.json names one; registryMirrors are, per registry, mirrors
// asked first when an image is pulled from it (image.Mirrors).
package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/dirs"
)

// FileName is the settings file's name in cove's config directory.
const FileName = "settings.json"

// Settings are what the file says; the zero value is cove's defaults.
type Settings struct {
	// Image is the default workspace image ("": cove's own default).
	Image string `json:"image,omitempty"`
	// RegistryMirrors are where else each registry's images are served.
	RegistryMirrors image.Mirrors `json:"registryMirrors,omitempty"`
	// Editor is the IDE's editor: open windows take a change within
	// seconds.
	Editor Editor `json:"editor"`
	// Path is the file they were read from (or would be), for messages.
	Path string `json:"-"`
}

// Editor is the IDE editor's settings; zero values are its defaults.
type Editor struct {
	FontSize int  `json:"fontSize,omitempty"` // in CSS pixels, 8 to 40
	TabSize  int  `json:"tabSize,omitempty"`  // columns a tab shows as, 1 to 16
	WordWrap bool `json:"wordWrap,omitempty"` // long lines wrap
	// FormatOnSave has the file's language server format it before it is
	// written (nil: as the project's devcontainer.json says, else no).
	FormatOnSave *bool `json:"formatOnSave,omitempty"`
}

// check says what is out of range.
func (e Editor) check() error {
	if e.FontSize != 0 && (e.FontSize < 8 || e.FontSize > 40) {
		return fmt.Errorf("editor.fontSize %d: give 8 to 40", e.FontSize)
	}
	if e.TabSize != 0 && (e.TabSize < 1 || e.TabSize > 16) {
		return fmt.Errorf("editor.tabSize %d: give 1 to 16", e.TabSize)
	}
	return nil
}

// Path is the settings file of the user whose home is home.
func Path(home string) string {
	return filepath.Join(dirs.ConfigDir(home), FileName)
}

// Load reads the settings file at path; a missing one is the defaults. A
// file cove cannot read or that says something it does not know is an
// error naming the file: a setting silently dropped would pull from
// where the user said not to.
func Load(path string) (Settings, error) {
	s := Settings{Path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("settings: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("settings %s: %w (it holds {\"image\": REF, \"registryMirrors\": {REGISTRY: [HOST[:PORT]…]}, \"editor\": {\"fontSize\": N, \"tabSize\": N, \"wordWrap\": BOOL, \"formatOnSave\": BOOL}}; fix it or move it away)", path, err)
	}
	if s.Image != "" {
		if _, err := image.ParseReference(s.Image); err != nil {
			return s, fmt.Errorf("settings %s: image: %w", path, err)
		}
	}
	if err := image.CheckMirrors(s.RegistryMirrors); err != nil {
		return s, fmt.Errorf("settings %s: %w", path, err)
	}
	if err := s.Editor.check(); err != nil {
		return s, fmt.Errorf("settings %s: %w", path, err)
	}
	return s, nil
}
