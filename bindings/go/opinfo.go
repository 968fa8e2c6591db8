package deft

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"strings"
	"unsafe"
)

// OpInfo describes a registered operator, from the registry (DeftOpGetInfo,
// DeftOpGetInputs, DeftOpGetParam): what generated wrappers are made from.
type OpInfo struct {
	Name        string // the name it was listed or asked for
	Canonical   string // the operator's own name, when Name is an alias
	Description string
	MinInputs   int // fewest inputs
	MaxInputs   int // most inputs (more than len(InputNames): any number)
	InputNames  []string
	Params      []ParamInfo
	// Outputs is the number of outputs with the default parameters and a
	// placeholder for each required one (2 for an int, (2,) for a tuple);
	// -1 when that cannot be told. Some operators make a number that
	// depends on their parameters (split's num_outputs).
	Outputs int
}

// ParamInfo describes one parameter of an operator.
type ParamInfo struct {
	Name string
	// Type is "int", "float", "boolean", "tuple of int", "dtype", "device",
	// "string" or "enum", with " or None" where None is allowed.
	Type     string
	Default  string // "" when Required
	Required bool
	Doc      string
	Choices  []string // the words an enum takes
}

func goStrings(p **C.char, n C.int) []string {
	if n <= 0 {
		return nil
	}
	list := unsafe.Slice(p, int(n))
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(list[i])
	}
	return out
}

// Operators lists every registered operator, in alphabetical order.
func Operators() ([]OpInfo, error) {
	var st C.go_status
	var n C.int
	var names **C.char
	if C.go_list_ops(&st, &n, &names) != 0 {
		return nil, fail(&st)
	}
	list := goStrings(names, n)
	out := make([]OpInfo, 0, len(list))
	for _, name := range list {
		info, err := Operator(name)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Operator describes the operator called name.
func Operator(name string) (OpInfo, error) {
	op, err := lookupOp(name)
	if err != nil {
		return OpInfo{}, err
	}
	var st C.go_status
	var cname, doc *C.char
	var minIn, maxIn, nNames, nParams C.int
	var inNames **C.char
	if C.go_op_info(&st, op.h, &cname, &doc, &minIn, &maxIn, &nNames, &inNames, &nParams) != 0 {
		return OpInfo{}, fail(&st)
	}
	info := OpInfo{Name: name, Canonical: C.GoString(cname), Description: C.GoString(doc), MinInputs: int(minIn),
		MaxInputs: int(maxIn), InputNames: goStrings(inNames, nNames)}
	for i := 0; i < int(nParams); i++ {
		var pname, ptype, pdef, pdoc *C.char
		var nChoices C.int
		var choices **C.char
		if C.go_op_param(&st, op.h, C.int(i), &pname, &ptype, &pdef, &pdoc, &nChoices, &choices) != 0 {
			return OpInfo{}, fail(&st)
		}
		p := ParamInfo{Name: C.GoString(pname), Type: C.GoString(ptype), Required: pdef == nil,
			Doc: C.GoString(pdoc), Choices: goStrings(choices, nChoices)}
		if pdef != nil {
			p.Default = C.GoString(pdef)
		}
		info.Params = append(info.Params, p)
	}
	info.Outputs = countOutputs(op, info.Params)
	return info, nil
}

// placeholders are values of each parameter type, for countOutputs.
var placeholders = map[string]string{"int": "2", "float": "1", "boolean": "false",
	"tuple of int": "(2,)", "dtype": "float32", "device": "cpu(0)", "string": ""}

func countOutputs(op *Op, params []ParamInfo) int {
	var keys, vals []string
	for _, p := range params {
		if !p.Required {
			continue
		}
		v, ok := placeholders[strings.TrimSuffix(p.Type, " or None")]
		if p.Type == "enum" && len(p.Choices) > 0 {
			v, ok = p.Choices[0], true
		}
		if !ok {
			return -1
		}
		keys, vals = append(keys, p.Name), append(vals, v)
	}
	ckeys, freeKeys := cStrings(keys)
	defer freeKeys()
	cvals, freeVals := cStrings(vals)
	defer freeVals()
	return int(C.go_count_outputs(op.h, C.int(len(keys)), &ckeys[0], &cvals[0]))
}
