// Package doccheck keeps the repository's Markdown self-contained: its test checks that
// every link is relative, resolves to a file of the repository and, with an #anchor, to a
// heading of that file, so the docs are read without leaving the repository. Slug is the
// anchor rule, shared with the generator of docs/api.md.
package doccheck

import (
	"regexp"
	"strings"
	"unicode"
)

// linkText keeps the text of the links of a heading.
var linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// Slug is the anchor GitHub gives a Markdown heading: its text (a link's text only) in
// lower case, without punctuation, spaces as hyphens. A repeated heading gets -1, -2, ...
// after it, which Slug leaves to the caller.
func Slug(heading string) string {
	heading = linkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
