package utf8tail

import "testing"

func TestIncomplete(t *testing.T) {
	euro := []byte("€") // 3 bytes
	tests := []struct {
		name string
		b    []byte
		want int
	}{
		{"empty", nil, 0},
		{"ascii", []byte("ab"), 0},
		{"a whole character", append([]byte("a"), euro...), 0},
		{"one byte of three", append([]byte("a"), euro[0]), 1},
		{"two bytes of three", append([]byte("a"), euro[:2]...), 2},
		{"a lone continuation byte", []byte{'a', 0x80}, 0},
		{"an invalid byte", []byte{'a', 0xff}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Incomplete(tt.b); got != tt.want {
				t.Errorf("Incomplete(%q) = %d, want %d", tt.b, got, tt.want)
			}
		})
	}
}
