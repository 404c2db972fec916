package fingerprint

import (
	"bufio"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestVectors runs the RFC 8785 input/output pairs byte for byte.
func TestVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "jcs", "input", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no vectors found")
	}
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", "jcs", "output", filepath.Base(in)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonicalize(src)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestES6Numbers checks every line of es6-numbers.csv twice: through the
// number writer, and through Canonicalize on a 17-digit literal of the same
// double.
func TestES6Numbers(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "jcs", "es6-numbers.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		lines++
		hexBits, want, ok := strings.Cut(sc.Text(), ",")
		if !ok {
			t.Fatalf("line %d: no comma", lines)
		}
		bits, err := strconv.ParseUint(hexBits, 16, 64)
		if err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		v := math.Float64frombits(bits)
		if got := string(appendES6(nil, v)); got != want {
			t.Errorf("line %d: %s: got %s, want %s", lines, hexBits, got, want)
		}
		lit := strconv.FormatFloat(v, 'g', 17, 64)
		got, err := Canonicalize([]byte(lit))
		if err != nil || string(got) != want {
			t.Errorf("line %d: Canonicalize(%s) = %s, %v; want %s", lines, lit, got, err, want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines < 2000 {
		t.Errorf("read %d lines, want the whole file", lines)
	}
}

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// RFC 8785 §3.2.2 example.
		{"rfc example", `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// RFC 8785 §3.2.3 example: UTF-16 order puts U+1F600 before U+FB33.
		{"rfc sorting", `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"raw utf16 order", "{\"\uffff\":1,\"\U0001F600\":2,\"\ue000\":3}", "{\"\U0001F600\":2,\"\ue000\":3,\"\uffff\":1}"},
		{"escaped and raw keys sort together", `{"b":1,"\u0061":2}`, `{"a":2,"b":1}`},
		{"prefix sorts first", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		{"scalar", ` "x" `, `"x"`},
		{"top-level number", `1E2`, `100`},
		{"minus zero", `[-0, -0.0, 0e5, -0E-3]`, `[0,0,0,0]`},
		{"integers kept", `[0, -1, 123456789012345, -999999999999999]`, `[0,-1,123456789012345,-999999999999999]`},
		{"16 digits", `[1234567890123456, 9007199254740993]`, `[1234567890123456,9007199254740992]`},
		{"big and small", `[1e21, 1e20, 1e-6, 1e-7, 123e-9]`, `[1e+21,100000000000000000000,0.000001,1e-7,1.23e-7]`},
		{"underflow rounds to zero", `[1e-400, -1e-400]`, `[0,0]`},
		{"long mantissa", `0.1000000000000000055511151231257827021181583404541015625`, `0.1`},
		{"escapes", `"\b\f\n\r\t\u0000\u001f\u007f\u00e9\/"`, "\"\\b\\f\\n\\r\\t\\u0000\\u001f\u007fé/\""},
		{"html not escaped", `"<a href=\"x\">&amp;</a>"`, `"<a href=\"x\">&amp;</a>"`},
		{"line separators literal", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"surrogate pair", `"\uD83D\uDE00"`, "\"\U0001F600\""},
		{"noncharacter", `"\uffff"`, "\"\uffff\""},
		{"replacement char", "\"\ufffd\"", "\"\ufffd\""},
		{"empty containers", `{"a":{},"b":[],"c":[{}]}`, `{"a":{},"b":[],"c":[{}]}`},
		{"nested sort", `{"b":{"y":1,"x":[{"q":1,"p":2}]},"a":0}`, `{"a":0,"b":{"x":[{"p":2,"q":1}],"y":1}}`},
		{"whitespace", " \t\r\n[ 1 , 2 ]\n ", `[1,2]`},
		{"many keys", `{"m":1,"l":1,"k":1,"j":1,"i":1,"h":1,"g":1,"f":1,"e":1,"d":1,"c":1,"b":1,"a":1,"n":1}`,
			`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"k":1,"l":1,"m":1,"n":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			again, err := Canonicalize(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %s, %v", again, err)
			}
		})
	}
}

func TestCompareUTF16(t *testing.T) {
	tests := []struct {
		name string
		x, y string
		want int
	}{
		{"equal", "abc", "abc", 0},
		{"prefix", "ab", "abc", -1},
		{"ascii", "b", "a", 1},
		{"bmp", "é", "z", 1},
		{"supplementary before E000", "\U0001F600", "\ue000", -1},
		{"FFFF after supplementary", "\uffff", "\U00010000", 1},
		{"supplementary among themselves", "\U00010000", "\U0010FFFF", -1},
		{"D7FF before supplementary", "\ud7ff", "\U00010000", -1},
		{"same lead, continuation differs", "\ue001", "\ue000", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compareUTF16([]byte(tt.x), []byte(tt.y))
			if sign(got) != tt.want {
				t.Errorf("compareUTF16(%q, %q) = %d, want sign %d", tt.x, tt.y, got, tt.want)
			}
			if sign(compareUTF16([]byte(tt.y), []byte(tt.x))) != -tt.want {
				t.Errorf("not antisymmetric")
			}
			if ref := compareRef(tt.x, tt.y); ref != tt.want {
				t.Errorf("reference says %d", ref)
			}
		})
	}
}

// compareRef compares by UTF-16 code units the slow, obvious way.
func compareRef(x, y string) int {
	a, b := utf16Units(x), utf16Units(y)
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return sign(int(a[i]) - int(b[i]))
		}
	}
	return sign(len(a) - len(b))
}

func utf16Units(s string) []uint16 {
	var u []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			u = append(u, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
			continue
		}
		u = append(u, uint16(r))
	}
	return u
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// TestNumberFastPaths checks that numbers rewritten without a float
// conversion come out exactly as the float path writes them.
func TestNumberFastPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var lits []string
	for range 20000 {
		var v float64
		switch rng.IntN(4) {
		case 0:
			v = math.Float64frombits(rng.Uint64())
		case 1:
			v = float64(rng.Int64N(1e15)) / math.Pow10(rng.IntN(20))
		case 2:
			v = rng.Float64() * math.Pow10(rng.IntN(600)-300)
		default:
			v = float64(rng.IntN(100000)) / 100
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		prec := rng.IntN(17) + 1
		lits = append(lits,
			strconv.FormatFloat(v, 'g', prec, 64),
			strconv.FormatFloat(v, 'e', prec-1, 64),
			strconv.FormatFloat(v, 'f', rng.IntN(8), 64),
			strconv.FormatFloat(v, 'E', -1, 64))
	}
	lits = append(lits, "0.0", "-0.000", "0e7", "000.5e1"[2:], "1.0e+0", "1e-0", "10.000", "0.000001",
		"0.0000001", "123456789012345.0", "1234567890123450000000", "12345678901234500000000",
		"9.99999999999999e290", "1e290", "1e291", "1e-290", "1e-291", "1.5e-300", "1e+0005", "5e-0324")
	for _, lit := range lits {
		if len(lit) > 330 {
			continue
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			continue
		}
		want := string(appendES6(nil, f))
		got, err := Canonicalize([]byte(lit))
		if err != nil || string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", lit, got, err, want)
		}
	}
}
