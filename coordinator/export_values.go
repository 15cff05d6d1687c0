package coordinator

import (
	"encoding/json"
	"fmt"
)

// Exported checks of stored values, for poolctl doctor: they apply the
// decoding the library itself uses, and say why a value is not one it
// would accept. They never change what the library accepts.

// CheckInstanceValue returns nil when b is an instance record for id that
// the library admits (claims bind to it), or an error wrapping ErrInvalid
// saying why not; that error also wraps ErrNotInstance when b is no
// instance record of that ID at all, as against one this version does not
// accept (a state a newer etcdpool may write).
func CheckInstanceValue(id string, b []byte) error {
	in, err := decodeInstance(id, b)
	if err != nil {
		return err
	}
	return in.validate()
}

// CheckSeatValue returns nil when b is a seat record the library can
// read, or an error wrapping ErrInvalid saying why not.
func CheckSeatValue(b []byte) error {
	var rec seatRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("not a seat record: %v", err)}
	}
	if rec.Holder == "" {
		return &InvalidError{Kind: ErrInvalid, Reason: "seat record without a holder"}
	}
	return nil
}

// CheckSpecValue returns nil when b is a pool spec the library accepts.
func CheckSpecValue(pool string, b []byte) error {
	_, err := decodeSpec(pool, b)
	return err
}
