// Command offsetd serves offsetd over HTTP and the Kafka protocol,
// administers a running server, and checks data directories offline.
//
//	offsetd serve [flags]               serve, on 127.0.0.1:7070 with data in ./offsetd-data
//	offsetd groups|describe|commit|delete|static|global-read|cluster ...   talk to a running server
//	offsetd verify|dump DIR             read a data directory, changing nothing
//	offsetd version                     the version and revision it was built from
//
// offsetd, offsetd -h and offsetd help list the commands; offsetd COMMAND
// -h explains one. The commands are listed in commands.go.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
