// Package eventfilter compiles spec.delivery.sinks[].filter: a CEL expression over an event's
// type, source, subject, id, time and data. The receiver evaluates the program it returns; the
// manager compiles the same expression to say in a condition, before any event arrives, that a
// sink's filter does not compile.
package eventfilter

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
)

// CostLimit bounds one evaluation of a filter (CEL cost units; Kubernetes allows 1,000,000 per
// call, "roughly 0.1 second"). The data variable is the event's JSON, unbounded in shape, so no
// static estimate can bound a filter that iterates it: the runtime limit does.
const CostLimit = 1_000_000

// env declares the event's attributes as the filter sees them.
func env() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("type", cel.StringType),
		cel.Variable("source", cel.StringType),
		cel.Variable("subject", cel.StringType),
		cel.Variable("id", cel.StringType),
		cel.Variable("time", cel.TimestampType),
		cel.Variable("data", cel.DynType),
		ext.Strings(),
	)
}

// Compile compiles expr into a program bounded by CostLimit. Its error is the CEL issue text
// (position included), fit for a condition or a log line: an undeclared variable, a syntax
// error, a result that is not a bool.
func Compile(expr string) (cel.Program, error) {
	e, err := env()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("filter does not compile: %w", iss.Err())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("filter does not compile: its result is %s, not a bool", ast.OutputType())
	}
	prg, err := e.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("filter does not compile: %w", err)
	}
	return prg, nil
}
