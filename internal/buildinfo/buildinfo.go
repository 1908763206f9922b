// Package buildinfo reads which offsetd a binary holds from the build
// information Go stamps into it: the module version and the VCS revision
// it was built from. The offsetd command prints it (offsetd version, the
// startup log) and the server exports it as offsetd_build_info.
//
//	info := buildinfo.Read()
//	fmt.Println(info) // offsetd v1.2.0 (revision 4f3c2a1…, go1.26.8)
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Module is offsetd's module path.
const Module = "github.com/offsetd/offsetd"

// Unknown stands for a version or revision the build did not record: a
// test binary, or a build outside a VCS checkout (-buildvcs=false).
const Unknown = "unknown"

// Info is what a binary knows of the offsetd it was built from.
type Info struct {
	// Version is offsetd's module version: a release tag, the
	// pseudo-version go build derives from the checkout
	// (v0.0.0-20261203181500-abcdef123456, "+dirty" when modified), or
	// "(devel)".
	Version string
	// Revision is the VCS commit the binary was built from, when offsetd
	// is the main module and go build recorded it; Unknown otherwise.
	Revision string
	// Modified reports whether the checkout had uncommitted changes.
	Modified bool
	// GoVersion is the Go release that built the binary.
	GoVersion string
}

// Read returns the build information of the running binary: offsetd's
// version as the main module, or as a dependency of a program that embeds
// it.
func Read() Info {
	info := Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if bi.Main.Path == Module {
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
		return info
	}
	for _, dep := range bi.Deps {
		if dep.Path == Module {
			if dep.Replace != nil && dep.Replace.Version != "" {
				dep = dep.Replace
			}
			if dep.Version != "" {
				info.Version = dep.Version
			}
		}
	}
	return info
}

// String is the one-line form offsetd version prints.
func (i Info) String() string {
	rev := i.Revision
	if i.Modified {
		rev += ", modified"
	}
	return fmt.Sprintf("offsetd %s (revision %s, %s)", i.Version, rev, i.GoVersion)
}
