package etcdclient

import (
	"fmt"
	"os"
	"strings"
)

// Environment variables both binaries read for credentials.
const (
	// EnvPassword holds the password of --user.
	EnvPassword = "ETCDPOOL_PASSWORD"
	// EnvPasswordFile names a file whose first line is the password.
	EnvPasswordFile = "ETCDPOOL_PASSWORD_FILE"
)

// ParseUser splits --user: "user:password" or "user" alone. hasPassword
// says whether a password was given inline. The error never contains the
// password.
func ParseUser(s string) (user, password string, hasPassword bool, err error) {
	user, password, hasPassword = strings.Cut(s, ":")
	if user == "" {
		if hasPassword {
			return "", "", false, &FieldError{"user", "want user:password or user; the user name before ':' is empty"}
		}
		return "", "", false, &FieldError{"user", "empty user name"}
	}
	return user, password, hasPassword, nil
}

// ReadPasswordFile returns the first line of path, without its line end.
// The error names the file, never its content.
func ReadPasswordFile(field, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &FieldError{field, fmt.Sprintf("cannot read the password file: %v", err)}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", &FieldError{field, fmt.Sprintf("%s: the first line is empty", path)}
	}
	return line, nil
}

// Credentials resolves the password of user from, in order: the inline
// "user:password" form, passwordFile, then $ETCDPOOL_PASSWORD_FILE and
// $ETCDPOOL_PASSWORD read by getenv. It returns "" when none is set; the
// caller may then prompt.
func Credentials(userFlag, passwordFile string, getenv func(string) string) (user, password string, err error) {
	if userFlag == "" {
		return "", "", nil
	}
	user, password, inline, err := ParseUser(userFlag)
	switch {
	case err != nil:
		return "", "", err
	case inline:
		return user, password, nil
	case passwordFile != "":
		password, err = ReadPasswordFile("password-file", passwordFile)
		return user, password, err
	}
	if f := getenv(EnvPasswordFile); f != "" {
		password, err = ReadPasswordFile(EnvPasswordFile, f)
		return user, password, err
	}
	return user, getenv(EnvPassword), nil
}

// EnvName returns the variable that sets the same value as a flag, for
// both binaries: "dial-timeout" -> "ETCDPOOL_DIAL_TIMEOUT".
func EnvName(flag string) string {
	return "ETCDPOOL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}
