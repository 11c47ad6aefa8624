// SPDX-License-Identifier: GPL-3.0-or-later
// Run the Khronos glTF-Validator on one .glb/.gltf and print its JSON report on stdout.
// Usage: node gltf_validate.js FILE   (NODE_PATH must reach the gltf-validator package)
const fs = require("fs");
const path = require("path");
const validator = require("gltf-validator");

const file = process.argv[2];
const data = new Uint8Array(fs.readFileSync(file));
validator
  .validateBytes(data, {
    uri: path.basename(file),
    maxIssues: 200,
    externalResourceFunction: (uri) =>
      new Promise((resolve, reject) => {
        fs.readFile(path.join(path.dirname(file), decodeURIComponent(uri)), (err, buf) =>
          err ? reject(err.toString()) : resolve(new Uint8Array(buf)));
      }),
  })
  .then((report) => process.stdout.write(JSON.stringify(report)))
  .catch((err) => {
    process.stderr.write(String(err) + "\n");
    process.exit(2);
  });
