# tests of group cpu
