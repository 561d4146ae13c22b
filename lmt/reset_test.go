package lmt

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"
)

// TestResetClearsEveryField: a pooled transfer whose every field, down to
// the leaves of its structs, was set is, after reset, a zero Transfer but
// for the storage reset keeps (the iovec, segment and staging lists at
// length 0 with their arrays, the packet buffer, the datatype arrays). A
// field added to Transfer or typed and not cleared by reset fails here,
// naming it.
func TestResetClearsEveryField(t *testing.T) {
	var tr Transfer
	fill(t, reflect.ValueOf(&tr).Elem(), "Transfer")
	keptPkt := tr.pkt
	keptRemote, keptStage := tr.dt.remote, tr.dt.lstage
	tr.reset()

	if cap(tr.iov) == 0 || len(tr.iov) != 0 || cap(tr.remote) == 0 || len(tr.remote) != 0 || cap(tr.dt.staging) == 0 || len(tr.dt.staging) != 0 {
		t.Errorf("iov %d/%d, remote %d/%d, staging %d/%d (len/cap): want empty lists that keep their arrays",
			len(tr.iov), cap(tr.iov), len(tr.remote), cap(tr.remote), len(tr.dt.staging), cap(tr.dt.staging))
	}
	if &tr.pkt[0] != &keptPkt[0] || !reflect.DeepEqual(tr.dt.remote, keptRemote) || !reflect.DeepEqual(tr.dt.lstage, keptStage) {
		t.Error("reset dropped the packet buffer or the datatype arrays it must keep")
	}
	kept := map[string]bool{"iov": true, "remote": true, "pkt": true, "dt": true}
	v := reflect.ValueOf(tr)
	for i := range v.NumField() {
		if f := v.Type().Field(i); !kept[f.Name] && !v.Field(i).IsZero() {
			t.Errorf("Transfer.%s survives reset", f.Name)
		}
	}
	keptDT := map[string]bool{"staging": true, "lstage": true, "remote": true, "rstage": true}
	d := reflect.ValueOf(tr.dt)
	for i := range d.NumField() {
		if f := d.Type().Field(i); !keptDT[f.Name] && !d.Field(i).IsZero() {
			t.Errorf("Transfer.dt.%s survives reset", f.Name)
		}
	}
}

// fill sets every leaf of v to a non-zero value.
func fill(t *testing.T, v reflect.Value, path string) {
	v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem() // unexported fields too
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Interface:
		fillInterface(t, v, path)
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), path)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	default:
		t.Fatalf("%s: cannot fill a %s", path, v.Kind())
	}
}

func fillInterface(t *testing.T, v reflect.Value, path string) {
	for _, c := range []any{errors.New("x"), pull{}, 1} {
		if reflect.TypeOf(c).Implements(v.Type()) {
			v.Set(reflect.ValueOf(c))
			return
		}
	}
	t.Fatalf("%s: no value for interface %s", path, v.Type())
}
