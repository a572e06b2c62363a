import{a}from"./chunk-4N7GF6LS.js";export{a as shell};
