package fingerprint

import (
	"fmt"
	"strings"
)

// stepKind is one step of a compiled field path.
type stepKind uint8

const (
	stepName     stepKind = iota // a member with exactly this name
	stepAnyName                  // "*": any one member
	stepElem                     // "[*]": any one array element
	stepAnyDepth                 // "**": zero or more steps of either kind
)

type step struct {
	kind stepKind
	name string
	fold bool // a stepName that matches under case folding (allow paths)
}

// parsePath compiles a field path such as "metadata.trace_id",
// "items[*].client_ts" or "**.nonce". The syntax is described in the package
// documentation; in short: segments separated by '.', each "**", "*" or a
// member name, each but "**" followed by any number of "[*]"; a path may
// start with "[*]" to reach into a top-level array; '\' makes the next
// character part of a name.
func parsePath(src string) ([]step, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidPath, src, why)
	}
	if src == "" {
		return nil, bad("empty path")
	}
	var steps []step
	s := src
	for seg := 0; ; seg++ {
		// One segment: its head, then any "[*]".
		var name strings.Builder
		head := false
		switch {
		case strings.HasPrefix(s, "**") && (len(s) == 2 || s[2] == '.'):
			s = s[2:]
			if len(steps) == 0 || steps[len(steps)-1].kind != stepAnyDepth {
				steps = append(steps, step{kind: stepAnyDepth})
			}
			head = true
		case strings.HasPrefix(s, "*") && (len(s) == 1 || s[1] == '.' || s[1] == '['):
			s = s[1:]
			steps = append(steps, step{kind: stepAnyName})
			head = true
		default:
			for len(s) > 0 && s[0] != '.' && s[0] != '[' {
				c := s[0]
				switch c {
				case '\\':
					if len(s) < 2 {
						return nil, bad("'\\' at the end")
					}
					name.WriteByte(s[1])
					s = s[2:]
					continue
				case '*', ']':
					return nil, bad(fmt.Sprintf("unescaped %q inside a name", c))
				}
				name.WriteByte(c)
				s = s[1:]
			}
			if name.Len() > 0 {
				steps = append(steps, step{kind: stepName, name: name.String()})
				head = true
			}
		}
		if !head && seg > 0 {
			return nil, bad("empty segment")
		}
		for strings.HasPrefix(s, "[") {
			if !strings.HasPrefix(s, "[*]") {
				return nil, bad(`only "[*]" may follow a name`)
			}
			s = s[3:]
			steps = append(steps, step{kind: stepElem})
			head = true
		}
		if !head {
			return nil, bad("empty segment")
		}
		if s == "" {
			break
		}
		if s[0] != '.' {
			return nil, bad(fmt.Sprintf("unexpected %q", s[0]))
		}
		s = s[1:]
		if s == "" {
			return nil, bad("empty segment at the end")
		}
	}
	for _, st := range steps {
		if st.kind != stepAnyDepth {
			return steps, nil
		}
	}
	return nil, bad(`"**" alone would match the whole body`)
}
