package model

// rank orders roles; an unknown role ranks below every known one.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleMember:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Valid reports whether r is viewer, member or admin.
func (r Role) Valid() bool { return r.rank() > 0 }

// AtLeast reports whether r has at least the rank of least; an unknown
// role (either one) allows nothing.
func (r Role) AtLeast(least Role) bool {
	return r.Valid() && least.Valid() && r.rank() >= least.rank()
}
