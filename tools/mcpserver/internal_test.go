//go:build linux

package mcpserver

import (
	"testing"
)

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.2:80", true},
		{"localhost:8080", true},
		{"LOCALHOST", true},
		{"[::1]:8080", true},
		{"::1", true},
		{"0.0.0.0:8080", false},
		{":8080", false},
		{"[::]:8080", false},
		{"192.168.1.2:8080", false},
		{"example.com:80", false},
		{"localhost.example.com:80", false},
	}
	for _, tc := range tests {
		if got := IsLoopback(tc.addr); got != tc.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}
