package datatype_test

import (
	"errors"
	"testing"

	"github.com/knemesis/knemesis/datatype"
)

func TestFits(t *testing.T) {
	v, _ := datatype.Vector(3, 4, 10) // extent 24
	if err := v.Fits(make([]byte, 24)); err != nil {
		t.Fatalf("24-byte base: %v", err)
	}
	err := v.Fits(make([]byte, 23))
	want := "datatype: buffer too short: vector extent = 24: reaches past the 23-byte base buffer; give a buffer of at least 24 bytes"
	var fe *datatype.FieldError
	if err == nil || err.Error() != want || !errors.As(err, &fe) || fe.Field != "extent" || !errors.Is(err, datatype.ErrShortBuffer) {
		t.Fatalf("23-byte base: %v\nwant %s", err, want)
	}
}
