# tests of group api
