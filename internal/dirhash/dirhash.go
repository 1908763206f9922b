// Package dirhash describes a directory tree by the names and bytes of
// what it holds, for tests that prove a refusal changed nothing.
package dirhash

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Tree describes every file and directory under dir, one a line: a
// directory's path, or a file's path and the SHA-256 of its bytes. Two
// descriptions are equal only if no byte, name or directory changed
// between them.
func Tree(dir string) (string, error) {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			fmt.Fprintf(&b, "%s/\n", rel)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %x\n", rel, sha256.Sum256(data))
		return nil
	})
	return b.String(), err
}
