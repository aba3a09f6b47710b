package naming_test

import "github.com/molt-dev/molt/internal/auth"

func authFull() auth.Caller { return auth.Caller{Token: auth.Token{Level: auth.Full}} }
