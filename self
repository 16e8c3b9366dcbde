{
 "format": "tinax warm start 1",
 "environment": {},
 "objects": {}
}
