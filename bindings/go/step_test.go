package deft

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// stepLoss records loss = square(w * x), elementwise (the step's head
// gradient is ones, so the gradient is 2 w x^2), and exports it.
func stepLoss(t *testing.T, x, w *NDArray) *Symbol {
	var loss *NDArray
	if err := WithDeferredCompute(func() error {
		wx := must(w.Call("elemwise_mul", []*NDArray{x}))
		loss = must(wx.Call("square", nil))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return must(Export([]Named{{"x", x}, {"w", w}}, []Named{{"loss", loss}}))
}

func near(got, want []float64) bool {
	for i := range want {
		if i >= len(got) || math.Abs(got[i]-want[i]) > 1e-12*(1+math.Abs(want[i])) {
			return false
		}
	}
	return len(got) == len(want)
}

// Three steps of one CachedOp call each update w and its momentum in place as
// MXNet's SGD with momentum does: mom = momentum mom - lr (rescale grad + wd w);
// w += mom. The loss of each step is that of the weight before it.
func TestTrainStepFollowsSGDMomentum(t *testing.T) {
	xs, want := []float64{1, -2, 0.5}, []float64{0.5, 0.25, -1}
	x, w := must(FromFloat64(xs, 3)), must(FromFloat64(want, 3))
	sym := stepLoss(t, x, w)
	defer sym.Close()
	step := must(sym.TrainStep("sgd_mom", "w"))
	defer step.Close()
	lr, wd, rescale, momentum := 0.1, 0.01, 0.5, 0.9
	hyper := must(FromFloat64([]float64{lr, wd, rescale, -1, momentum, 0, 0}, 7))
	mom := must(Zeros(Float64, 3))
	args, aux := must(step.ListInputs()), must(step.ListAuxiliaryStates())
	if fmt.Sprint(aux) != "[w_mom]" || len(args) != 3 {
		t.Fatalf("step inputs %v, auxiliary states %v", args, aux)
	}
	given := map[string]*NDArray{"x": x, "w": w, "step_hyper": hyper, "w_mom": mom}
	var inputs []*NDArray
	for _, name := range append(args, aux...) {
		if given[name] == nil {
			t.Fatalf("unexpected step input %q", name)
		}
		inputs = append(inputs, given[name])
	}
	op := must(NewCachedOp(step))
	defer op.Close()
	wantMom := make([]float64, 3)
	for s := 0; s < 3; s++ {
		outs := must(op.Call(inputs...))
		if len(outs) != 2 {
			t.Fatalf("step %d gave %d outputs, want the loss and the updates' output", s, len(outs))
		}
		wantLoss := make([]float64, 3)
		for i := range xs {
			wantLoss[i] = want[i] * xs[i] * want[i] * xs[i]
			grad := 2 * want[i] * xs[i] * xs[i]
			wantMom[i] = momentum*wantMom[i] - lr*(rescale*grad+wd*want[i])
			want[i] += wantMom[i]
		}
		if got := must(outs[0].Float64s()); !near(got, wantLoss) {
			t.Fatalf("step %d: loss %v, want %v", s, got, wantLoss)
		}
		if got := must(w.Float64s()); !near(got, want) {
			t.Fatalf("step %d: w %v, want %v", s, got, want)
		}
		if got := must(mom.Float64s()); !near(got, wantMom) {
			t.Fatalf("step %d: w_mom %v, want %v", s, got, wantMom)
		}
	}
}

func TestTrainStepErrorsNameTheCause(t *testing.T) {
	x, w := must(FromFloat64([]float64{1, 2}, 2)), must(FromFloat64([]float64{3, 4}, 2))
	sym := stepLoss(t, x, w)
	defer sym.Close()
	for _, c := range []struct {
		optimizer, param, want string
	}{
		{"lbfgs", "w", "optimizer is 'lbfgs', expected one of sgd, sgd_mom, adam, adamw"},
		{"sgd_mom", "v", "params[0] is 'v', which is not an argument of the loss"},
	} {
		step, err := sym.TrainStep(c.optimizer, c.param)
		var e *Error
		if step != nil || !errors.As(err, &e) || e.Kind != ErrValue ||
			!strings.Contains(e.Message, c.want) {
			t.Fatalf("TrainStep(%q, %q) = %v, %v; want the error %q", c.optimizer, c.param,
				step, err, c.want)
		}
	}
	if err := sym.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sym.TrainStep("sgd", "w"); err != ErrClosed {
		t.Fatalf("TrainStep after Close: %v", err)
	}
}
