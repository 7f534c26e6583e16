package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berth-hq/berth/internal/api"
)

// CreateProject makes a project (admin only).
func (c *Client) CreateProject(ctx context.Context, name string) (*api.Project, error) {
	var p api.Project
	return &p, c.do(ctx, c.http, http.MethodPost, "/projects", api.ProjectRequest{Name: name}, &p)
}

// Projects lists the caller's projects (every one for an admin), with
// their members when members is set.
func (c *Client) Projects(ctx context.Context, members bool) ([]api.Project, error) {
	var ps []api.Project
	path := "/projects"
	if members {
		path += "?members=1"
	}
	return ps, c.do(ctx, c.http, http.MethodGet, path, nil, &ps)
}

// DeleteProject deletes a project with no active runs (admin only).
func (c *Client) DeleteProject(ctx context.Context, name string) error {
	return c.do(ctx, c.http, http.MethodDelete, "/projects/"+url.PathEscape(name), nil, nil)
}

// Members lists a project's members.
func (c *Client) Members(ctx context.Context, project string) ([]api.Member, error) {
	var ms []api.Member
	return ms, c.do(ctx, c.http, http.MethodGet, "/projects/"+url.PathEscape(project)+"/members", nil, &ms)
}

// SetMember makes user a member of project with role, or changes their role.
func (c *Client) SetMember(ctx context.Context, project, user, role string) (*api.Member, error) {
	var m api.Member
	return &m, c.do(ctx, c.http, http.MethodPut, "/projects/"+url.PathEscape(project)+"/members/"+url.PathEscape(user), api.MemberRequest{Role: role}, &m)
}

// RemoveMember ends user's membership of project.
func (c *Client) RemoveMember(ctx context.Context, project, user string) error {
	return c.do(ctx, c.http, http.MethodDelete, "/projects/"+url.PathEscape(project)+"/members/"+url.PathEscape(user), nil, nil)
}
