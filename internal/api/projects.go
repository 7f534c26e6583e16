package api

import "time"

// Projects and roles: a project is a tenant (Slurm's account); its members
// have a role each (admin, manager, user).

// Project is a project as the caller sees it: Role is the caller's in it
// ("" for a global admin who is no member); Members are listed when asked
// (GET /projects?members=1).
type Project struct {
	Name      string    `json:"name"`
	Role      string    `json:"role,omitempty"`
	Default   bool      `json:"default,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Members   []Member  `json:"members,omitempty"`
}

// ProjectRequest creates a project (POST /projects, admin).
type ProjectRequest struct {
	Name string `json:"name"`
}

// Member is a user's membership of a project.
type Member struct {
	Project string    `json:"project"`
	User    string    `json:"user"`
	Role    string    `json:"role"`
	Since   time.Time `json:"since"`
}

// MemberRequest sets a member's role (PUT /projects/{name}/members/{user}).
type MemberRequest struct {
	Role string `json:"role"`
}
