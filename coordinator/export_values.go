package coordinator

import (
	"encoding/json"
	"fmt"
)

// Exported checks of stored values, for poolctl doctor: they apply the
// decoding the library itself uses, and say why a value is not one it
// would accept. They never change what the library accepts.

// CheckInstanceValue returns nil when b is an instance record for id that
// the library admits, or an error wrapping ErrInvalid saying why not.
func CheckInstanceValue(id string, b []byte) error {
	var in Instance
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("%w: not an instance record: %v", ErrInvalid, err)
	}
	if in.ID != id {
		return fmt.Errorf("%w: the record names instance %.64q, not the key's", ErrInvalid, in.ID)
	}
	in.defaults()
	return in.validate()
}

// CheckSeatValue returns nil when b is a seat record the library can
// read, or an error wrapping ErrInvalid saying why not.
func CheckSeatValue(b []byte) error {
	var rec seatRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("%w: not a seat record: %v", ErrInvalid, err)
	}
	if rec.Holder == "" {
		return fmt.Errorf("%w: seat record without a holder", ErrInvalid)
	}
	return nil
}

// CheckSpecValue returns nil when b is a pool spec the library accepts.
func CheckSpecValue(pool string, b []byte) error {
	_, err := decodeSpec(pool, b)
	return err
}
