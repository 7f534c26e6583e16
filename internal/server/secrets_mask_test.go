package server

import (
	"bytes"
	"strings"
	"testing"
)

// maskStream feeds data to maskValues and heldBack frame by frame, as the
// intake does, and returns what would be stored.
func maskStream(vals []string, frames ...string) string {
	vals = mergeMasks(nil, vals)
	var out, tail []byte
	for _, f := range frames {
		data := maskValues(append(tail, f...), vals)
		hold := heldBack(data, vals)
		out = append(out, data[:len(data)-hold]...)
		tail = bytes.Clone(data[len(data)-hold:])
	}
	return string(append(out, tail...))
}

func TestMaskStream(t *testing.T) {
	tests := map[string]struct {
		vals   []string
		frames []string
		want   string
	}{
		"whole":                 {[]string{"s3cret"}, []string{"a s3cret b s3cret"}, "a *** b ***"},
		"split in two":          {[]string{"s3cret"}, []string{"a s3", "cret b"}, "a *** b"},
		"split in three":        {[]string{"s3cret"}, []string{"a s", "3cr", "et"}, "a ***"},
		"one byte at a time":    {[]string{"s3cret"}, strings.Split("xs3crets3cret", ""), "x******"},
		"a prefix never closed": {[]string{"s3cret"}, []string{"a s3c", "x"}, "a s3cx"},
		"longest first":         {[]string{"abcd", "abcdef"}, []string{"abcdef abcd"}, "*** ***"},
		"too short to mask":     {[]string{"abc"}, []string{"abc"}, "abc"},
		"two values":            {[]string{"alpha1", "beta22"}, []string{"alp", "ha1 bet", "a22."}, "*** ***."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := maskStream(tc.vals, tc.frames...); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// BenchmarkMaskFrame: a 4 KiB frame of output, three values of 20-40
// bytes to mask, none in it (the common case).
func BenchmarkMaskFrame(b *testing.B) {
	vals := mergeMasks(nil, []string{"hf_0123456789abcdefghij", "wandb-0123456789abcdefghij0123456789", "pw-0123456789abcdef"})
	frame := bytes.Repeat([]byte("epoch 12: loss 0.1234 lr 0.0003\n"), 128)
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		data := maskValues(frame, vals)
		_ = heldBack(data, vals)
	}
}
