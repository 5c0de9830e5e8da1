// Package atoms is the structure kind: 3D atomistic structures as
// interatomic-potential trainers (MACE, fairchem) read them, and what is
// computed on them once at conversion (the neighbour list) or per epoch
// in the daemon (rotations, position noise).
//
// Contract:
//
//   - Units are ASE's: Å, eV, eV/Å, eV/Å³. A cell is three row vectors
//     (ASE's Atoms.cell); only the periodic ones are used.
//   - Builder.Build gives the full directed neighbour list under a cutoff
//     in ASE's convention (matscipy, vesin and MACE agree): every (i, j, S)
//     with D = pos[j] − pos[i] + S·cell, |D| < cutoff, S an integer shift
//     that is 0 along non-periodic axes, i = j only at S ≠ 0 (a periodic
//     self-image), coincident atoms kept, each pair's two directions side
//     by side; or in
//     fairchem's (Convention). Any triclinic cell, mixed boundary
//     conditions, cells shorter than the cutoff (many images), positions
//     anywhere: time linear in atoms plus edges (cell lists).
//   - Bad input (a position or periodic cell vector that is not finite, a
//     singular periodic cell, zero atoms where a structure needs one) is
//     ErrStructure naming the atom or axis; nothing panics.
package atoms
