// Command hookwarden is the Hookwarden command line, also installed as the kubectl plugin
// kubectl-hookwarden (kubectl hookwarden ...). The commands live in cli/.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/hookwarden/hookwarden/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	o := cli.Options{Streams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, SetVerbosity: klogVerbosity}
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		o.DisplayName = "kubectl hookwarden" // as the kubectl plugin
	}
	code := cli.Run(ctx, os.Args[1:], o)
	stop()
	os.Exit(code)
}

// klogVerbosity sets the level client-go logs at (klog, on stderr), as kubectl's -v does.
func klogVerbosity(level int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(level))
}
