package atoms

import "strings"

// symbols[z] is element z's symbol (ASE's chemical_symbols; 0 is "X", a
// dummy atom, which no structure here holds).
var symbols = strings.Fields("X H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og")

// MaxZ is the largest atomic number (oganesson).
const MaxZ = 118

// Symbol is element z's symbol, or "" outside 1..MaxZ.
func Symbol(z int) string {
	if z < 1 || z > MaxZ {
		return ""
	}
	return symbols[z]
}

// Number is the atomic number of symbol s as ASE reads it (the first
// letter upper case, the rest lower: "cu" and "CU" are copper), or 0 for
// an unknown symbol.
func Number(s []byte) uint8 {
	if len(s) == 0 || len(s) > 2 {
		return 0
	}
	c0, c1 := upper(s[0]), byte(0)
	if len(s) == 2 {
		c1 = lower(s[1])
		if c1 < 'a' || c1 > 'z' {
			return 0
		}
	}
	if c0 < 'A' || c0 > 'Z' {
		return 0
	}
	return byLetters[slot(c0, c1)]
}

// slot is a symbol's index in byLetters: its first letter (A-Z) and
// second (none, or a-z).
func slot(c0, c1 byte) int {
	k := int(c0-'A') * 27
	if c1 != 0 {
		k += int(c1-'a') + 1
	}
	return k
}

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c - 'A' + 'a'
	}
	return c
}

var byLetters = func() (t [26 * 27]uint8) {
	for z := 1; z <= MaxZ; z++ {
		s := symbols[z]
		c1 := byte(0)
		if len(s) == 2 {
			c1 = s[1]
		}
		t[slot(s[0], c1)] = uint8(z)
	}
	return t
}()
