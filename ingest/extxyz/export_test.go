package extxyz

// ParseFloat is parseFloat, for the external tests.
var ParseFloat = parseFloat
