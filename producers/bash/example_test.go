//go:build linux

package bash_test

import (
	"context"
	"fmt"
	"time"

	"github.com/taskrt/taskrt/producers/bash"
)

func ExampleProducer_Run() {
	p := bash.New()
	res, err := p.Run(context.Background(), bash.Command{Command: "echo hello; exit 3"}, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q %s %s\n", res.Output, res.Outcome.Status, res.Outcome.Detail)
	// Output: "hello\n" completed exit code: 3
}

func ExampleProducer_Start() {
	p := bash.New(bash.WithGrace(time.Second))
	h, err := p.Start(bash.Command{Command: "echo started; sleep 1000"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Release()
	_ = h.Cancel("no longer needed")
	o := <-h.Done
	fmt.Println(o.Status, o.Detail)
	// Output: killed signal: SIGTERM
}
