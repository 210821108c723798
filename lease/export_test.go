package lease

// Joint reports whether m writes leases in the job store's transactions.
func Joint(m *Manager) bool { return m.joint != nil }
