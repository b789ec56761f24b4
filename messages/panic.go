package messages

import "fmt"

// PanicError is a panic recovered from code that taskrt calls but does not own — a
// producer's Run, Cancel, ReadOutput or Release, an injector, a cleanup, an OnDone
// listener, a sub-agent launcher — or from the runtime's own code. It keeps the stack
// of the panicking goroutine. When the panic value is an error, errors.Is and
// errors.As see it through Unwrap.
type PanicError struct {
	Where string // what panicked: "run", "cancel", "cleanup", "listener", "registry", …
	Value any    // the value passed to panic
	Stack []byte // the panicking goroutine's stack, as debug.Stack reports it
}

// Error reads "<where> panicked: <value>".
func (e *PanicError) Error() string { return fmt.Sprintf("%s panicked: %v", e.Where, e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}
