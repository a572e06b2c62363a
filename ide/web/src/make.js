// Makefiles' highlighting. CodeMirror has no make mode (neither 6 nor 5's
// legacy ones), so this is a small stream parser: comments, directives,
// the targets of rules, variables set and used ($(CC), $@); a recipe line
// (after a tab) is shell, through the legacy shell mode.
import { shell } from "@codemirror/legacy-modes/mode/shell";

const directive = /^(?:-?include|sinclude|ifeq|ifneq|ifdef|ifndef|else|endif|define|endef|export|unexport|override|private|vpath|undefine)(?=\s|$)/;

export const make = {
  name: "make",
  startState: () => ({ recipe: false, cont: false, continued: false, sh: shell.startState() }),
  copyState: (s) => ({ ...s, sh: { ...s.sh, tokens: [...s.sh.tokens] } }),
  token(stream, state) {
    if (stream.sol()) {
      // A line ending in a backslash goes on in the next one, same kind.
      state.continued = state.cont;
      if (!state.continued) {
        state.recipe = stream.peek() === "\t";
        if (state.recipe) state.sh = shell.startState();
      }
      state.cont = /\\$/.test(stream.string);
    }
    // Make's variables, in recipes too: $(NAME), ${NAME}, $@, $<, $$…
    if (stream.match(/^\$[({][^)}]*[)}]?/) || stream.match(/^\$[@<^?*%+|$]/)) return "variableName.special";
    if (state.recipe) return shell.token(stream, state.sh);
    if (stream.eatSpace()) return null;
    if (stream.peek() === "#") {
      stream.skipToEnd();
      return "comment";
    }
    const atStart = !state.continued && stream.string.slice(0, stream.pos).trim() === "";
    if (atStart && stream.match(directive)) return "keyword";
    // NAME = …, NAME := …, NAME ?= …, NAME += …
    if (atStart && stream.match(/^[^\s:#=?+!$]+(?=\s*(?:[:?+!]|::)?=)/)) return "def";
    if (stream.match(/^(?:::=|:=|\?=|\+=|!=|=)/)) return "operator";
    // target …: prerequisites
    if (atStart && stream.match(/^[^:#=\s$][^:#=$]*?(?=\s*::?(?!=))/)) return "def";
    if (stream.match(/^::?/)) return "operator";
    stream.eatWhile(/[^\s$#:=]/);
    if (stream.current() === "") stream.next();
    return null;
  },
  languageData: { commentTokens: { line: "#" } },
};
