package container

import (
	"encoding/binary"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
)

// TestSeccompArgChecks runs each argument check the filter compiles, in
// x/net/bpf's interpreter over a seccomp_data, against the same check
// done in Go on 64-bit values: equal, not equal, the four orders and
// masked equal, with values whose halves differ each way (the filter
// compares a 32-bit half at a time).
func TestSeccompArgChecks(t *testing.T) {
	t.Parallel()
	values := []uint64{0, 1, 40, 0xffffffff, 0x100000000, 0x100000001, 0x100000028, 0xffffffff00000000, 0xfffffffffffffffe, ^uint64(0)}
	ops := map[specs.LinuxSeccompOperator]func(x, v, two uint64) bool{
		specs.OpEqualTo:      func(x, v, _ uint64) bool { return x == v },
		specs.OpNotEqual:     func(x, v, _ uint64) bool { return x != v },
		specs.OpLessThan:     func(x, v, _ uint64) bool { return x < v },
		specs.OpLessEqual:    func(x, v, _ uint64) bool { return x <= v },
		specs.OpGreaterThan:  func(x, v, _ uint64) bool { return x > v },
		specs.OpGreaterEqual: func(x, v, _ uint64) bool { return x >= v },
		specs.OpMaskedEqual:  func(x, v, two uint64) bool { return x&v == two },
	}
	for op, want := range ops {
		for _, v := range values {
			for _, two := range []uint64{0, 1, 0x100000000} {
				arg := specs.LinuxSeccompArg{Index: 2, Value: v, ValueTwo: two, Op: op}
				var a asm
				fail := a.label()
				a.argCheck(arg, fail)
				a.ret(1)
				a.mark(fail)
				a.ret(0)
				prog, err := a.assemble()
				if err != nil {
					t.Fatal(err)
				}
				vm, err := bpf.NewVM(prog)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range values {
					// seccomp_data as the filter's 32-bit loads see it (the
					// interpreter reads big-endian words; the kernel native
					// ones: the words' values are what count).
					data := make([]byte, 64)
					binary.BigEndian.PutUint32(data[offArg(2, false):], uint32(x))
					binary.BigEndian.PutUint32(data[offArg(2, true):], uint32(x>>32))
					got, err := vm.Run(data)
					if err != nil {
						t.Fatal(err)
					}
					if (got == 1) != want(x, v, two) {
						t.Errorf("%s value %#x two %#x: arg %#x held=%v, want %v", op, v, two, x, got == 1, want(x, v, two))
					}
				}
				if op != specs.OpMaskedEqual {
					break // ValueTwo is only the mask's
				}
			}
		}
	}
}
