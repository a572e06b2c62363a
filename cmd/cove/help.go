package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// flagLine is how cove's help shows a flag: its names and placeholder,
// then what it does, and a default only where one says something (not
// "false", not 0, not what the description already names). urfave/cli's
// own wrote "(default: a free one) (default: 0)", "(default: false)" on
// every switch, and repeated a slice flag's name, which pushed every
// description to column 77.
func flagLine(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return f.String()
	}
	placeholder, usage := unquoteUsage(df.GetUsage())
	var names []string
	for _, n := range f.Names() {
		if len(n) == 1 {
			names = append(names, "-"+n)
		} else {
			names = append(names, "--"+n)
		}
	}
	head := strings.Join(names, ", ")
	if df.TakesValue() {
		if placeholder == "" {
			placeholder = "value"
		}
		head += " " + placeholder
	}
	switch def := df.GetDefaultText(); def {
	case "", "false", "0", `""`, "[]":
	default:
		if !strings.Contains(usage, "default") {
			usage += " (default: " + strings.Trim(def, `"`) + ")"
		}
	}
	return head + "\t" + usage
}

// unquoteUsage takes the `placeholder` out of a usage text, as urfave/cli
// does.
func unquoteUsage(usage string) (placeholder, text string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	name := usage[i+1 : i+1+j]
	return name, usage[:i] + name + usage[i+2+j:]
}
