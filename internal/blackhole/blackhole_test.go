package blackhole

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a line echo server; it returns its address and a stop function.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	conns := make(chan net.Conn, 16)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(l)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		close(conns)
		for c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func TestProxy(t *testing.T) {
	p, err := New(echo(t))
	require.NoError(t, err)
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(line string) {
		t.Helper()
		_, err := c.Write([]byte(line))
		require.NoError(t, err)
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, line, got)
	}

	t.Run("forwards both ways while not cut", func(t *testing.T) {
		roundTrip("one\n")
	})
	t.Run("while cut nothing arrives and nothing is closed; after heal what was sent arrives in order", func(t *testing.T) {
		p.Cut()
		_, err := c.Write([]byte("two\n"))
		require.NoError(t, err, "the sender sees no error: a partition is silent")
		require.NoError(t, c.SetReadDeadline(time.Now().Add(150*time.Millisecond)))
		_, err = r.ReadString('\n')
		require.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing comes back while cut")
		require.NoError(t, c.SetReadDeadline(time.Time{}))
		p.Heal()
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "two\n", got, "what waited during the cut arrives after the heal")
		roundTrip("three\n")
	})
	t.Run("a connection made while cut is held until heal", func(t *testing.T) {
		p.Cut()
		c2, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		defer c2.Close()
		_, err = c2.Write([]byte("four\n"))
		require.NoError(t, err)
		require.NoError(t, c2.SetReadDeadline(time.Now().Add(150*time.Millisecond)))
		r2 := bufio.NewReader(c2)
		_, err = r2.ReadString('\n')
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.NoError(t, c2.SetReadDeadline(time.Time{}))
		p.Heal()
		got, err := r2.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "four\n", got)
	})
	t.Run("close ends every connection, also a cut one", func(t *testing.T) {
		p.Cut()
		p.Close()
		_, err := r.ReadString('\n')
		require.Error(t, err)
		assert.False(t, errors.Is(err, os.ErrDeadlineExceeded))
	})
}
