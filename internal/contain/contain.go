// Package contain is the one way taskrt recovers from a panic: every package that
// calls code it does not own (a producer's hooks, an injector, a cleanup, a
// listener) goes through it, so every contained panic becomes a
// *messages.PanicError that keeps its stack.
package contain

import (
	"runtime/debug"

	"github.com/taskrt/taskrt/messages"
)

// Call calls f and turns a panic into a *messages.PanicError naming where.
func Call(where string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &messages.PanicError{Where: where, Value: p, Stack: debug.Stack()}
		}
	}()
	return f()
}

// Value is Call for a function that also returns a value.
func Value[T any](where string, f func() (T, error)) (v T, err error) {
	err = Call(where, func() error {
		var e error
		v, e = f()
		return e
	})
	return v, err
}
