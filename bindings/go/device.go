package deft

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
)

// DeviceType is a kind of device; the numbers are DLPack's.
type DeviceType int

const (
	CPUDevice DeviceType = 1
	GPUDevice DeviceType = 2
)

// Device is where an array lives: the CPU, or a GPU by number.
type Device struct {
	Type DeviceType
	ID   int
}

// CPU is the host.
var CPU = Device{CPUDevice, 0}

// GPU is GPU number id (0 to GPUCount()-1).
func GPU(id int) Device { return Device{GPUDevice, id} }

// String writes the device as operators' "ctx" parameter takes it: "cpu(0)", "gpu(1)".
func (d Device) String() string {
	if d.Type == GPUDevice {
		return fmt.Sprintf("gpu(%d)", d.ID)
	}
	return fmt.Sprintf("cpu(%d)", d.ID)
}

// GPUCount is the number of GPUs deft can use: 0 without CUDA, a driver or a GPU.
func GPUCount() (int, error) {
	var st C.go_status
	var n C.int
	if C.go_gpu_count(&st, &n) != 0 {
		return 0, fail(&st)
	}
	return int(n), nil
}

// Device returns where the array lives.
func (a *NDArray) Device() (Device, error) {
	h, err := a.raw()
	if err != nil {
		return Device{}, err
	}
	defer runtime.KeepAlive(a)
	var st C.go_status
	var t, id C.int
	if C.go_device(&st, h, &t, &id) != 0 {
		return Device{}, fail(&st)
	}
	return Device{DeviceType(t), int(id)}, nil
}

// CopyTo returns a copy of the array on dev (asynchronous, like an operator).
func (a *NDArray) CopyTo(dev Device) (*NDArray, error) {
	shape, err := a.Shape()
	if err != nil {
		return nil, err
	}
	dtype, err := a.DType()
	if err != nil {
		return nil, err
	}
	out, err := ZerosOn(dev, dtype, shape...)
	if err != nil {
		return nil, err
	}
	if err := InvokeInto("_copyto", []*NDArray{a}, []*NDArray{out}); err != nil {
		out.Close()
		return nil, err
	}
	return out, nil
}
