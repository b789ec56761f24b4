package output

import (
	"log/slog"
	"os"
)

// Defaults of the options.
const (
	defaultMaxRead  = 32 << 10 // bytes one read returns at most (before rendering)
	defaultHead     = 32 << 10 // bytes kept in memory from the start of the output
	defaultTail     = 64 << 10 // bytes kept in memory from the end of the output
	defaultSpillCap = 64 << 20 // bytes the spill file holds at most
	minMaxRead      = 256
	minTail         = 4 << 10
)

// Option configures a Buffer. A zero or negative value keeps the default; "none" has
// an option of its own (WithoutSpill).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	maxRead     int
	head, tail  int
	spillDir    string
	spillCap    int64
	spillPrefix string
	logger      *slog.Logger
	block       bool
}

func defaultConfig() config {
	return config{
		maxRead:     defaultMaxRead,
		head:        defaultHead,
		tail:        defaultTail,
		spillDir:    os.TempDir(),
		spillCap:    defaultSpillCap,
		spillPrefix: "taskrt-output-",
		logger:      slog.New(slog.DiscardHandler),
	}
}

// WithMaxRead sets how many output bytes one read returns at most (default 32 KiB, at
// least 256). A larger delta is returned as its head and tail around a marker.
// Rendering can make the returned string longer: invalid UTF-8 bytes become U+FFFD
// and the marker line is added.
func WithMaxRead(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxRead = max(n, minMaxRead)
		}
	})
}

// WithMemory sets how many bytes of the output's start (head) and end (tail) stay in
// memory (defaults 32 KiB and 64 KiB; the tail is at least 4 KiB).
func WithMemory(head, tail int) Option {
	return optionFunc(func(c *config) {
		if head > 0 {
			c.head = head
		}
		if tail > 0 {
			c.tail = max(tail, minTail)
		}
	})
}

// WithSpillDir sets the directory of spill files (default os.TempDir()).
func WithSpillDir(dir string) Option {
	return optionFunc(func(c *config) {
		if dir != "" {
			c.spillDir = dir
		}
	})
}

// WithSpillCap sets the largest size of the spill file (default 64 MiB). Output past
// it that no longer fits in memory is counted as dropped.
func WithSpillCap(n int64) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.spillCap = n
		}
	})
}

// WithoutSpill keeps output in memory only: what leaves the head and the tail is
// dropped and counted.
func WithoutSpill() Option {
	return optionFunc(func(c *config) { c.spillCap = 0 })
}

// WithSpillPrefix sets the spill file name's prefix (default "taskrt-output-"), so
// that a producer's files are recognisable.
func WithSpillPrefix(p string) Option {
	return optionFunc(func(c *config) {
		if p != "" {
			c.spillPrefix = p
		}
	})
}

// WithLogger sets the logger for spill-file problems (default: discard).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithBlocking puts the buffer in block mode: instead of dropping what does not
// fit, Write waits while a read's worth of output (the smaller of the read size and
// the tail, 32 KiB by default) is unread, and goes on as the reader consumes it — a
// writer feeding it from a pipe stops reading the pipe, and the command writing into
// the pipe blocks as it would under a slow reader. Nothing is dropped and every
// consuming read returns all that is unread, without a marker. Observer reads (Peek)
// do not consume: they still see only what the memory holds and skip the rest.
// A block-mode buffer keeps no spill file (every unread byte is in memory).
// Unblock, or Release, ends block mode for good.
func WithBlocking() Option {
	return optionFunc(func(c *config) { c.block = true })
}
