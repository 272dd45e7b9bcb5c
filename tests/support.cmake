# tests of group support
