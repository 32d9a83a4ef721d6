// Command hookwarden is the Hookwarden command line, also installed as the kubectl plugin
// kubectl-hookwarden (kubectl hookwarden ...). The commands live in internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/hookwarden/hookwarden/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	o := cli.Options{Streams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}}
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		o.DisplayName = "kubectl hookwarden" // as the kubectl plugin
	}
	code := cli.Run(ctx, os.Args[1:], o)
	stop()
	os.Exit(code)
}
