// aws-cdk's own diff engine (@aws-cdk/cloudformation-diff, what `cdk diff` runs) over a corpus of template
// pairs: node tests/cfn_diff_impacts.js PAIRS.json OUT.json, where PAIRS.json is {"name": [old, new], ...};
// OUT.json gets, per pair, each resource's changeImpact (WILL_UPDATE, WILL_REPLACE, MAY_REPLACE,
// WILL_DESTROY, WILL_ORPHAN, WILL_CREATE, NO_CHANGE). One Node start for the whole corpus
// (tests/test_review_floor.py compares the review's verdicts with these).
const { fullDiff } = require("../node_modules/@aws-cdk/cloudformation-diff");
const fs = require("node:fs");
const pairs = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const out = {};
for (const [name, [before, after]] of Object.entries(pairs)) {
  const impacts = {};
  fullDiff(before, after).resources.forEachDifference((id, change) => { impacts[id] = change.changeImpact; });
  out[name] = impacts;
}
fs.writeFileSync(process.argv[3], JSON.stringify(out));
