package tu

// ChainDataset is chainDataset (blocks_test.go) for the external tests.
var ChainDataset = chainDataset
