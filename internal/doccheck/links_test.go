package doccheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	autolink   = regexp.MustCompile(`<((?:https?|ftp|mailto):[^>\s]+)>`)
	bareURL    = regexp.MustCompile(`\b(?:https?|ftp)://[^\s)>\]]+`)
	heading    = regexp.MustCompile(`(?m)^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// markdownFiles lists the Markdown files under root (not under .git, testdata or dist).
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "dist", "node_modules", "stint-data":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// prose is a Markdown text without its fenced code blocks and code spans, whose text is
// not links; lines stay where they were, so that errors name the right line.
func prose(text string) string {
	var b strings.Builder
	fence := ""
	for line := range strings.Lines(text) {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			b.WriteString("\n")
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			b.WriteString("\n")
		default:
			b.WriteString(codeSpan.ReplaceAllString(line, "``"))
		}
	}
	return b.String()
}

// anchors are the fragment ids of a Markdown file's headings, as GitHub makes them: the
// heading's text in lower case, without punctuation, spaces as hyphens, a repeated one
// suffixed -1, -2, ...; and the ids of its HTML anchors.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	// Headings are read from the text with code spans kept (their words count), outside
	// fences.
	seen := map[string]int{}
	fence := ""
	for line := range strings.Lines(text) {
		trimmed := strings.TrimLeft(line, " ")
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			if fence == "" {
				fence = trimmed[:3]
			} else if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		m := heading.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(prose(text), -1) {
		out[m[1]] = true
	}
	return out
}

// TestLinksStayInRepository: every link of every Markdown file of the repository is
// relative and resolves to a file or directory of it, and an #anchor to a heading of its
// file; no text outside code is a URL.
func TestLinksStayInRepository(t *testing.T) {
	t.Parallel()
	problems := checkLinks(t, filepath.Join("..", ".."))
	require.Empty(t, problems, "Markdown links that leave the repository or lead nowhere:\n%s", strings.Join(problems, "\n"))
}

// TestCheckLinks: what checkLinks finds in a small repository.
func TestCheckLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("docs/b.md", "# B\n\n## Run states `waiting`\n\n## Same\n\n## Same\n")
	write("README.md", "# A\n\n"+
		"[ok](docs/b.md) [ok](docs/b.md#run-states-waiting) [ok](docs/b.md#same-1) [ok](#a) [dir](docs)\n"+
		"[web](https://example.com) <https://example.com/x> and https://example.com/y\n"+
		"[gone](docs/c.md) [no heading](docs/b.md#nope) [out](../outside/DESIGN.md) [abs](/etc/passwd)\n"+
		"`https://in.code` and\n```\n[in fence](nowhere.md) https://in.fence\n```\n"+
		"[ref]: https://example.com/ref\n")
	write("testdata/skipped.md", "[gone](nowhere.md)\n")
	require.ElementsMatch(t, []string{
		"README.md:4: link https://example.com leaves the repository",
		"README.md:4: link https://example.com/x leaves the repository",
		"README.md:4: URL https://example.com/y leaves the repository (put it in code if it is an example)",
		"README.md:5: link docs/c.md: no such file",
		"README.md:5: link docs/b.md#nope: no heading #nope in b.md",
		"README.md:5: link ../outside/DESIGN.md leaves the repository",
		"README.md:5: link /etc/passwd is absolute: make it relative to README.md",
		"README.md:10: link https://example.com/ref leaves the repository",
	}, checkLinks(t, dir))
}

// checkLinks returns what is wrong with the links of the Markdown files under root, a
// line per problem, by file and line.
func checkLinks(t *testing.T, root string) []string {
	t.Helper()
	absRoot, err := filepath.Abs(root)
	require.NoError(t, err)
	files := markdownFiles(t, root)
	require.NotEmpty(t, files)
	anchorsOf := map[string]map[string]bool{}
	anchorsFor := func(path string) map[string]bool {
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		anchorsOf[path] = anchors(string(b))
		return anchorsOf[path]
	}
	var problems []string
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		text := prose(string(b))
		rel, _ := filepath.Rel(root, file)
		report := func(offset int, format string, a ...any) {
			line := strings.Count(text[:offset], "\n") + 1
			problems = append(problems, rel+":"+strconv.Itoa(line)+": "+fmt.Sprintf(format, a...))
		}
		var targets [][]int // [start, end) of each link target in text
		for _, m := range inlineLink.FindAllStringSubmatchIndex(text, -1) {
			targets = append(targets, m[2:4])
		}
		for _, m := range refLink.FindAllStringSubmatchIndex(text, -1) {
			targets = append(targets, m[2:4])
		}
		for _, m := range autolink.FindAllStringSubmatchIndex(text, -1) {
			report(m[0], "link %s leaves the repository", text[m[2]:m[3]])
		}
		linked := map[int]bool{}
		for _, tg := range targets {
			linked[tg[0]] = true
			target := text[tg[0]:tg[1]]
			if target == "" {
				report(tg[0], "empty link")
				continue
			}
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "//") {
				report(tg[0], "link %s leaves the repository", target)
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				if strings.HasPrefix(path, "/") {
					report(tg[0], "link %s is absolute: make it relative to %s", target, rel)
					continue
				}
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				absDest, err := filepath.Abs(dest)
				require.NoError(t, err)
				if absDest != absRoot && !strings.HasPrefix(absDest, absRoot+string(filepath.Separator)) {
					report(tg[0], "link %s leaves the repository", target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					report(tg[0], "link %s: no such file", target)
					continue
				}
			}
			if frag != "" {
				if !strings.HasSuffix(dest, ".md") {
					report(tg[0], "link %s: an anchor in a file that is not Markdown", target)
				} else if !anchorsFor(dest)[frag] {
					report(tg[0], "link %s: no heading #%s in %s", target, frag, filepath.Base(dest))
				}
			}
		}
		for _, m := range bareURL.FindAllStringIndex(text, -1) {
			if !linked[m[0]] && !strings.HasPrefix(text[max(m[0]-1, 0):], "<") {
				report(m[0], "URL %s leaves the repository (put it in code if it is an example)", text[m[0]:m[1]])
			}
		}
	}
	return problems
}
