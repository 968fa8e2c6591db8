package deft

//go:generate go run -tags deft_noops ./gen -o ops_gen.go

import (
	"fmt"
	"strconv"
	"strings"
)

// What the generated operator functions (ops_gen.go) share.

// Ptr returns a pointer to v, for the optional fields of the generated
// options structs: &deft.SumOpts{Keepdims: deft.Ptr(true)}.
func Ptr[T any](v T) *T { return &v }

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }

// formatFloat writes whole numbers as integers: quicker, and for small ones
// without allocating (the usual x + 1).
func formatFloat(v float64) string {
	if i := int64(v); float64(i) == v && i > -1<<53 && i < 1<<53 {
		return strconv.FormatInt(i, 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
func formatBool(v bool) string { return strconv.FormatBool(v) }

// formatTuple writes a tuple as the registry parses it: (2,3), (2,).
func formatTuple(v []int64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatInt(x, 10)
	}
	if len(v) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ",") + ")"
}

// optionalInputs appends the optional inputs given, which must come first
// (an input is known by its position).
func optionalInputs(op string, inputs, optional []*NDArray) ([]*NDArray, error) {
	for i, a := range optional {
		if a == nil {
			for _, later := range optional[i+1:] {
				if later != nil {
					return nil, &Error{Kind: ErrValue, Message: fmt.Sprintf(
						"deft: %s: optional input %d is given but input %d is not", op, i+len(inputs)+1, i+len(inputs))}
				}
			}
			break
		}
		inputs = append(inputs, a)
	}
	return inputs, nil
}
