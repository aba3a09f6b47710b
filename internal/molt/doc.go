// Package molt holds what every other package of molt shares: the one error type
// with its codes, and the injectable clock and id generator.
//
// Domain packages (work, workspace, auth, settings, …) return *Error values built
// here; the HTTP layer maps Code to a status with a single table, and writes Reason
// (or Code when Reason is empty) as the problem document's stable "code".
package molt
