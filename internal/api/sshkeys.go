package api

import "time"

// SSHKey is a user's SSH public key: with it, the server's SSH gateway
// (`berth server --ssh-listen`) lets its user into their runs' SSH
// endpoints with no token (GET/POST /ssh-keys, DELETE
// /ssh-keys/{fingerprint}).
type SSHKey struct {
	Fingerprint string    `json:"fingerprint"` // SHA256:…, as ssh-keygen -l prints it
	User        string    `json:"user"`
	Type        string    `json:"type"` // ssh-ed25519, ssh-rsa, …
	Comment     string    `json:"comment,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// SSHKeyAdd is POST /ssh-keys: a public key in the authorized_keys form
// (the one line of a .pub file).
type SSHKeyAdd struct {
	PublicKey string `json:"public_key"`
}
