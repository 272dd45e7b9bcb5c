# tests of group core
